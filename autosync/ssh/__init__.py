"""autosync-sshlink (here) and autosync-remote (on the server): the link without XMPP."""
