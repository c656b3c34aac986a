# SPDX-License-Identifier: Apache-2.0
"""The method urllib3 2.0.7 added to HTTPHeaderDict, as a hook of the urllib3-cve-2023-45803 spec."""
from __future__ import annotations

import typing

# Header fields that describe a body (RFC 9110, Section 15.4): a redirect that turns the request into a
# GET drops them with the body.
CONTENT_SPECIFIC_HEADERS = (
    "Content-Encoding",
    "Content-Language",
    "Content-Location",
    "Content-Type",
    "Content-Length",
    "Digest",
    "Last-Modified",
)


def prepare_for_method_change(headers: typing.Any) -> typing.Any:
    """``HTTPHeaderDict._prepare_for_method_change``: drop the content-specific fields, return the dict."""
    for header in CONTENT_SPECIFIC_HEADERS:
        headers.discard(header)
    return headers
