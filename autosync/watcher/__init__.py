"""autosync-watcher: inotify events, batched, sent to the committer."""
