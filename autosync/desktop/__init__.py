"""autosync-desktop (notifications) and autosync-tray (the status icon)."""
