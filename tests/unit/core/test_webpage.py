"""core/webpage.py: the address file and the page's one-time tickets."""
import os
import stat

from autosync.core import webpage


def test_a_ticket_opens_once_in_time_and_only_with_its_secret():
    used = set()
    ticket = webpage.ticket("secret", now=1000)
    assert webpage.ticket_ok("secret", ticket, used, now=1000 + webpage.TICKET_LIFE - 1)
    assert not webpage.ticket_ok("secret", ticket, used, now=1001)  # once
    again = webpage.ticket("secret", now=1000)
    assert not webpage.ticket_ok("secret", again, set(), now=1000 + webpage.TICKET_LIFE + 1)
    assert not webpage.ticket_ok("other", again, set(), now=1000)
    nonce, until, signature = again.split(".")
    assert not webpage.ticket_ok("secret", "%s.%d.%s" % (nonce, int(until) + 999, signature),
                                 set(), now=1000)
    assert not webpage.ticket_ok("secret", "", set()) and "secret" not in again


def test_the_address_file_is_private_and_names_a_live_page(private_home):
    path = webpage.write_address(1, "the secret", pid=os.getpid())
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert webpage.read_address() is None  # nobody answers on port 1
    webpage.remove_address(os.getpid() + 1)  # another's: left
    assert os.path.exists(path)
    webpage.remove_address(os.getpid())
    assert not os.path.exists(path)
