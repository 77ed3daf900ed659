"""Redaction: suggested edits that lift a document's set to k, replacement strategies and the redacted release."""
