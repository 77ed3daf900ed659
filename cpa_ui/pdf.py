"""The certificate report as a PDF, rendered from the report's print version with WeasyPrint.

Nothing is fetched: the report is self-contained, and the URL fetcher refuses every URL anyway (a refused
resource is left out, the rendering goes on).
"""

from __future__ import annotations

from functools import cache

SYSTEM_LIBRARIES = "libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0"  # Debian's names


@cache
def pdf_unavailable() -> str | None:
    """Why no PDF can be rendered on this machine (WeasyPrint loads the system's pango library), else ``None``."""
    try:
        import weasyprint  # noqa: F401
    except OSError as error:
        return (f"the PDF needs the system's text-layout libraries, which are missing ({error}); on Debian or Ubuntu: "
                f"apt-get install {SYSTEM_LIBRARIES}")
    return None


if pdf_unavailable() is None:
    from weasyprint import HTML
    from weasyprint.urls import URLFetcher
else:  # the HTML report still works; the page says why there is no PDF
    HTML = None
    URLFetcher = object


class RefusingFetcher(URLFetcher):
    """A WeasyPrint URL fetcher that fetches nothing; ``refused`` lists what it was asked for."""

    def __init__(self):
        super().__init__()
        self.refused: list[str] = []

    def fetch(self, url, headers=None):
        self.refused.append(url)
        raise ValueError(f"the certificate report fetches nothing: {url[:80]}")


def report_pdf(html: str, fetcher: RefusingFetcher | None = None) -> bytes:
    """The PDF of a certificate report (best from :func:`cpa_core.report.html.certificate_report` with
    ``for_print=True``), A4, with the report's print styles; ``fetcher`` records any URL the document asked for
    (none, for a report)."""
    return HTML(string=html, url_fetcher=fetcher or RefusingFetcher(), media_type="print").write_pdf()
