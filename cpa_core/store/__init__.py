"""What an audit leaves behind: the output folder's records, the reproducible bundle, snapshots and the history."""
