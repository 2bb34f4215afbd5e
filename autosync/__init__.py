"""dvcs-autosync: a folder kept in sync through a DVCS repository the user owns."""
__version__ = "1.0.0.dev0"
