"""The certificate report as a PDF, rendered from the report's print version with WeasyPrint.

Nothing is fetched: the report is self-contained, and the URL fetcher refuses every URL anyway (a refused
resource is left out, the rendering goes on).
"""

from __future__ import annotations

from weasyprint import HTML
from weasyprint.urls import URLFetcher


class RefusingFetcher(URLFetcher):
    """A WeasyPrint URL fetcher that fetches nothing; ``refused`` lists what it was asked for."""

    def __init__(self):
        super().__init__()
        self.refused: list[str] = []

    def fetch(self, url, headers=None):
        self.refused.append(url)
        raise ValueError(f"the certificate report fetches nothing: {url[:80]}")


def report_pdf(html: str, fetcher: RefusingFetcher | None = None) -> bytes:
    """The PDF of a certificate report (best from ``certificate_report(..., for_print=True)``), A4, with the
    report's print styles; ``fetcher`` records any URL the document asked for (none, for a report)."""
    return HTML(string=html, url_fetcher=fetcher or RefusingFetcher(), media_type="print").write_pdf()
