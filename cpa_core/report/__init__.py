"""What an audit says: metrics and the summary, diagnostics, the release verdict, evidence rows and the
redaction worklist."""
