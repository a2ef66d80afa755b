"""A request's images as the proxy records them: checked against the size limit, and located in the body.

The dialect decoded each inline image (`openforge.dialects.images`); here each becomes a `CallImage` of the
call's record, with the span of its base64 text in the request body when that text stands there verbatim and in
canonical form, so that the store keeps the bytes once per hash and the body without them (`store/images.py`).
"""

from __future__ import annotations

import base64

from openforge.core import CallImage
from openforge.dialects import DialectError
from openforge.dialects.images import RequestImage


def oversized(images: list[RequestImage], limit: int) -> DialectError | None:
    """A 413 naming the first image whose decoded bytes exceed `limit` (`ProxySettings.max_image_bytes`)."""
    for image in images:
        if len(image.data) > limit:
            return DialectError(
                413,
                "request_too_large",
                f"{image.param}: the image is {len(image.data)} bytes, more than the proxy accepts "
                f"({limit} bytes, max_image_bytes)",
                image.param,
            )
    return None


def call_images(body: bytes, images: list[RequestImage]) -> list[CallImage]:
    """The request's images, in body order, for its record. The base64 text of each is searched for after the
    previous one's; not found verbatim (the JSON escaped a character of it) or not canonical, it has no span and
    stays in the stored body."""
    out: list[CallImage] = []
    cursor = 0
    for image in images:
        span = None
        if image.encoded is not None:
            needle = image.encoded.encode("ascii", errors="replace")
            at = body.find(needle, cursor) if base64.b64encode(image.data) == needle else -1
            if at >= 0:
                span, cursor = (at, len(needle)), at + len(needle)
        out.append(
            CallImage(sha256=image.sha256, media_type=image.media_type, size=len(image.data), url=image.url, span=span)
        )
    return out
