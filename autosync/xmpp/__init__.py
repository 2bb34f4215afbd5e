"""autosync-xmpp: pushes announced to the other machines, and heard from them."""
