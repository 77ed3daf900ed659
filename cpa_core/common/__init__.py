"""What every layer shares: the error tree, typed parameters, progress reporting and cache folders."""
