"""The curator's dashboard: Streamlit glue over :mod:`cpa_core`.

``figures``, ``report``, ``analysis``, ``text`` and ``help`` are pure (no Streamlit) and tested on their
own; ``state``, ``cache`` and ``components`` hold the Streamlit glue the pages share.
"""
