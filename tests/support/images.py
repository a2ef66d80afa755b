"""Real image files for the image tests (PNG written here with zlib, no imaging library), and the request parts
each dialect carries them in. No tests here."""

from __future__ import annotations

import base64
import random
import struct
import zlib

from openforge.core import CallImage
from openforge.dialects import DIALECTS
from openforge.proxy.images import call_images


def png(width: int = 64, height: int = 48, seed: int = 0) -> bytes:
    """A valid RGB PNG of noise (incompressible: its size is about width × height × 3 bytes); `seed` picks it."""
    rng = random.Random(seed)
    rows = b"".join(b"\x00" + rng.randbytes(width * 3) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{b64(data)}"


def anthropic_image(data: bytes, media_type: str = "image/png") -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": b64(data)}}


def responses_image(data: bytes) -> dict:
    return {"type": "input_image", "image_url": data_url(data), "detail": "auto"}


def chat_image(data: bytes) -> dict:
    return {"type": "image_url", "image_url": {"url": data_url(data), "detail": "auto"}}


def recorded_images(dialect: str, body: bytes) -> list[CallImage]:
    """What the proxy records of a body's images (synthetic runs made without a proxy)."""
    return call_images(body, DIALECTS[dialect].decode(body).images)
