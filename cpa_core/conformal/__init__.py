"""The conformal core (numpy only): nonconformity scores, the exact threshold, calibration and certified sets."""
