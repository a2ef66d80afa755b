"""Images in requests: base64 and data-URL images decoded and checked, and where each stands in its message.

A harness sends screenshots inline (Anthropic `image` blocks with a base64 source, Responses `input_image` and
Chat Completions `image_url` parts with a data URL, or bare base64) or by reference (an http(s) URL, a file
id). An inline image is decoded here, checked (valid base64, a PNG, JPEG, GIF or WebP image whose bytes say
the media type it claims) and hashed; a malformed one is a 400 naming the field, in the harness's own error
format. The model reads the image's placeholder text (`IMAGE_PLACEHOLDER`) unless its chat template takes
images; the canonical message keeps an `ImageRef` (hash, media type, size) at the placeholder's offset, and
the request keeps the decoded bytes (`DecodedRequest.images`) for the proxy to record, once per hash.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from openforge.core import ImageRef
from openforge.dialects import wire

# What a non-text input (image, audio, file) becomes for a model that reads text only: refusing the whole
# request would end a harness's episode over one screenshot.
IMAGE_PLACEHOLDER = "[image omitted: this model reads text only]"

# The image types the Anthropic and OpenAI APIs accept, by the bytes each file starts with.
MEDIA_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_WHITESPACE = re.compile(r"\s+")
_DATA_URL = re.compile(r"data:(?P<type>[^;,]*)(?P<params>(?:;[^;,]*)*),", re.ASCII)


def sniff(data: bytes) -> str | None:
    """The media type the bytes say they are (None: none of `MEDIA_TYPES`)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


@dataclass(frozen=True)
class RequestImage:
    """One image of a request, in the order the body holds them.

    Inline: `data` (the decoded bytes), their `sha256`, `media_type`, and `encoded`, the base64 text as the
    request's JSON string held it (the proxy looks for it in the body, to store the body without it). By
    reference: `url` (an http(s) URL or a file id), nothing else. `param` is the field it came from.
    """

    param: str
    sha256: str | None = None
    media_type: str | None = None
    data: bytes = b""
    encoded: str | None = None
    url: str | None = None

    def ref(self, offset: int) -> ImageRef:
        return ImageRef(
            offset=offset,
            length=len(IMAGE_PLACEHOLDER),
            sha256=self.sha256,
            media_type=self.media_type,
            size=len(self.data),
            url=self.url,
        )


def decode_base64(encoded: str, declared: str | None, param: str) -> RequestImage:
    """An inline image from its base64 text. `declared`: the media type the request claims (None: none claimed,
    the bytes say). A 400 naming `param` when the text is not base64 or the bytes are not such an image."""
    if declared is not None and declared not in MEDIA_TYPES:
        raise wire.bad(param, f"image media type must be one of {', '.join(MEDIA_TYPES)}, got {declared!r}")
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        try:  # line-wrapped base64 (MIME style) is still base64
            data = base64.b64decode(_WHITESPACE.sub("", encoded), validate=True)
        except (binascii.Error, ValueError):
            raise wire.bad(param, "image data is not valid base64") from None
    if not data:
        raise wire.bad(param, "image data is empty")
    found = sniff(data)
    if found is None:
        raise wire.bad(param, f"image data is not a {', '.join(t.split('/')[1].upper() for t in MEDIA_TYPES)} image")
    if declared is not None and declared != found:
        raise wire.bad(param, f"image media type is {declared!r} but the data is {found!r}")
    return RequestImage(
        param=param, sha256=hashlib.sha256(data).hexdigest(), media_type=found, data=data, encoded=encoded
    )


def from_url(url: str, param: str, *, bare_base64: bool = False) -> RequestImage:
    """An image given as a URL: a base64 data URL is decoded; an http(s) URL is kept by reference (nothing
    here fetches it). `bare_base64`: a string that is neither is read as base64 image data (Chat Completions
    clients that send the base64 text alone)."""
    match = _DATA_URL.match(url)
    if match is not None:
        params = [p.strip().lower() for p in match.group("params").split(";") if p.strip()]
        if "base64" not in params:
            raise wire.bad(param, "only base64 data URLs are supported for images (data:image/png;base64,...)")
        declared = match.group("type").strip().lower() or None
        return decode_base64(url[match.end() :], declared, param)
    if url.startswith(("http://", "https://")):
        return RequestImage(param=param, url=url)
    if bare_base64 and url:
        return decode_base64(url, None, param)
    raise wire.bad(param, "expected an http(s) URL or a base64 data URL (data:image/png;base64,...)")


class Parts:
    """The text of a message's content parts, joined as every dialect joins them (`separator`), with each
    image's placeholder standing where the image was; the request's images are collected in `request`."""

    def __init__(self, request: list[RequestImage], separator: str):
        self._request = request
        self._separator = separator
        self._texts: list[str] = []
        self._images: list[tuple[int, RequestImage]] = []  # index into _texts

    def __bool__(self) -> bool:
        return bool(self._texts)

    def text(self, text: str) -> None:
        self._texts.append(text)

    def image(self, image: RequestImage) -> None:
        self._request.append(image)
        self._images.append((len(self._texts), image))
        self._texts.append(IMAGE_PLACEHOLDER)

    def build(self) -> tuple[str, list[ImageRef]]:
        """The joined text and the images in it; both start over."""
        offsets: list[int] = []
        at = 0
        for text in self._texts:
            offsets.append(at)
            at += len(text) + len(self._separator)
        joined = self._separator.join(self._texts)
        refs = [image.ref(offsets[i]) for i, image in self._images]
        self._texts, self._images = [], []
        return joined, refs
