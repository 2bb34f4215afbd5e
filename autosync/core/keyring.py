"""The XMPP password in the desktop's keyring: the Secret Service on the session bus
(GNOME Keyring, KWallet, KeePassXC), for `password = keyring` in [xmpp].

`dvcs-autosync init --account` stores it there where a Secret Service answers; the XMPP
login (xmpp/session.py) reads it each time it logs in. The item is found by its
attributes (application dvcs-autosync, account USER@DOMAIN), whichever keyring holds it.

Every call waits at most TIMEOUT seconds and nothing here ever prompts: a keyring that is
locked, missing or not answering is a KeyringError whose one line says which (and never
holds the password), so the login fails with it, the status names it (the link problem),
and the login is tried again later, when the user may have unlocked it.
"""
from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection
from jeepney.wrappers import DBusErrorResponse, unwrap_msg

from autosync.core.config import KEYRING  # noqa: F401  ([xmpp] password = keyring)

TIMEOUT = 5.0  # seconds one call may take
NAME = "org.freedesktop.secrets"
SERVICE = DBusAddress("/org/freedesktop/secrets", bus_name=NAME,
                      interface="org.freedesktop.Secret.Service")
NO_SERVICE = ("org.freedesktop.DBus.Error.ServiceUnknown",
              "org.freedesktop.DBus.Error.NameHasNoOwner")
LOCKED = "org.freedesktop.Secret.Error.IsLocked"


class KeyringError(Exception):
    """The keyring cannot give or keep the password; str() is one line."""


def attributes(account):
    return {"application": "dvcs-autosync", "account": account}


class Service:
    """One connection to the Secret Service, with a plain (unencrypted) session: the
    secret travels over the user's own session bus, as libsecret's default does."""

    def __init__(self):
        try:
            self.conn = open_dbus_connection(bus="SESSION")
        except Exception as e:  # no address, no socket, refused: the same to the user
            raise KeyringError("no keyring: no D-Bus session bus (%s)" % (
                "DBUS_SESSION_BUS_ADDRESS is not set" if isinstance(e, KeyError)
                else str(e) or type(e).__name__)) from None
        try:
            self.session = self.call(SERVICE, "OpenSession", "sv", ("plain", ("s", "")))[1]
        except BaseException:
            self.conn.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.conn.close()

    def call(self, address, method, signature=None, body=()):
        message = new_method_call(address, method, signature, body)
        try:
            reply = self.conn.send_and_get_reply(message, timeout=TIMEOUT)
        except TimeoutError:
            raise KeyringError("the keyring (Secret Service) did not answer within %g s"
                               % TIMEOUT) from None
        except OSError as e:
            raise KeyringError("the keyring's D-Bus connection failed: %s" % e) from None
        try:
            return unwrap_msg(reply)
        except DBusErrorResponse as e:
            if e.name in NO_SERVICE:
                raise KeyringError("no keyring: nothing answers as the Secret Service (%s) "
                                   "on the session bus" % NAME) from None
            if e.name == LOCKED:
                raise KeyringError("the keyring is locked: unlock it (log in to the desktop, "
                                   "or open it in your keyring's manager)") from None
            said = " ".join(str(d) for d in e.data) if e.data else ""
            raise KeyringError("the keyring refused %s: %s%s" % (
                method, e.name, ": " + said if said else "")) from None

    def collection(self, path):
        return DBusAddress(path, bus_name=NAME, interface="org.freedesktop.Secret.Collection")


def available():
    """Whether a Secret Service answers on the session bus."""
    try:
        with Service():
            return True
    except KeyringError:
        return False


def password(account):
    """The password kept for `account`; KeyringError (one line) when it cannot be had."""
    with Service() as service:
        unlocked, locked = service.call(SERVICE, "SearchItems", "a{ss}", (attributes(account),))
        if not unlocked:
            if locked:
                raise KeyringError("the keyring that holds the XMPP password of %s is locked: "
                                   "unlock it (log in to the desktop, or open it in your "
                                   "keyring's manager); the login is tried again" % account)
            raise KeyringError("the keyring holds no XMPP password of %s (dvcs-autosync init "
                               "--account puts it there; or write it as [xmpp] password)"
                               % account)
        (secrets,) = service.call(SERVICE, "GetSecrets", "aoo", (unlocked[:1], service.session))
        secret = secrets.get(unlocked[0])
        if secret is None:
            raise KeyringError("the keyring gave no secret for %s" % account)
        try:
            return bytes(secret[2]).decode("utf-8")
        except UnicodeDecodeError:
            raise KeyringError("the keyring's password of %s is not UTF-8 text" % account) \
                from None


def store(account, secret):
    """Keep `secret` as the password of `account` in the default keyring (replacing an
    earlier one); KeyringError when it cannot be kept there without asking."""
    with Service() as service:
        (path,) = service.call(SERVICE, "ReadAlias", "s", ("default",))
        if path == "/":
            raise KeyringError("the keyring has no default collection to keep the password in")
        properties = {
            "org.freedesktop.Secret.Item.Label": ("s", "dvcs-autosync: XMPP password of %s"
                                                  % account),
            "org.freedesktop.Secret.Item.Attributes": ("a{ss}", attributes(account))}
        value = (service.session, b"", secret.encode("utf-8"), "text/plain; charset=utf8")
        _, prompt = service.call(service.collection(path), "CreateItem", "a{sv}(oayays)b",
                                 (properties, value, True))
        if prompt != "/":  # it would ask the user (a locked keyring): not here
            raise KeyringError("the default keyring is locked: unlock it, or keep the password "
                               "in the config file")
