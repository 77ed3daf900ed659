"""The PDF renderer fetches nothing. Rendering a report takes seconds, so the tests of the PDF certificate report
(rendered offline from the print version, with the verdict on its first page) are integration tests:
tests/integration/test_pdf_render.py.
"""

from __future__ import annotations

from cpa_ui.pdf import RefusingFetcher, report_pdf


def test_the_renderer_fetches_nothing():
    fetcher = RefusingFetcher()
    pdf = report_pdf('<html><body><p>text</p><img src="http://127.0.0.1:9/beacon.png">'
                     '<link rel="stylesheet" href="https://127.0.0.1:9/style.css"></body></html>', fetcher)
    assert pdf.startswith(b"%PDF-") and sorted(fetcher.refused) == ["http://127.0.0.1:9/beacon.png",
                                                                     "https://127.0.0.1:9/style.css"]
