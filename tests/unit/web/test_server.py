"""web/server.py: whose a loopback connection is, read from a socket table."""
from autosync.web.server import loopback_owner

TABLE = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1FBB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1
   1: 0100007F:1FBB 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 2 1
   2: 0100007F:D431 0100007F:1FBB 01 00000000:00000000 00:00000000 00000000 65534        0 3 1
"""


def test_the_owner_is_the_client_socket_s(tmp_path):
    table = tmp_path / "tcp"
    table.write_text(TABLE)
    server, client = ("127.0.0.1", 0x1FBB), ("127.0.0.1", 0xD431)
    assert loopback_owner(server, client, str(table)) == 65534
    assert loopback_owner(server, ("127.0.0.1", 1), str(table)) is None
    assert loopback_owner(server, client, str(tmp_path / "missing")) is None
