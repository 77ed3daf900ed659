"""The release and the registry as the audit reads them: file formats and encodings, column mapping, validated
tables, knowledge levels, placeholders and the calibration/test split."""
