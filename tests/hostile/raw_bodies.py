"""Request bodies on a raw socket: a head that announces a length (or chunked
encoding) the client need not send, and an exchange that reads the answer while
the rest of the body is held back. An HTTP client library sends the whole body it
announces before it reads anything, so it cannot show that an answer came first."""

import socket


def post_head(path: str, *, token: str | None, length: int | None = None) -> bytes:
    """A JSON POST's head up to its last header line: `Content-Length: length`, or
    chunked transfer encoding where `length` is None."""
    lines = [f"POST {path} HTTP/1.1", "Host: control", "Content-Type: application/json"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines.append(
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    )
    return ("\r\n".join(lines) + "\r\n").encode("latin-1")


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def exchange(
    port: int, head: bytes, body: bytes = b"", *, timeout_s: float = 5.0
) -> tuple[int, str]:
    """Sends the request head and `body` (not necessarily all the head announces), then
    reads the answer up to its declared length: (status, raw response text); status 0
    if the server closed without one. Times out if none comes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(head + b"\r\n" + body)
        received = b""
        while b"\r\n\r\n" not in received or not _complete(received):
            data = sock.recv(65536)
            if not data:
                break
            received += data
    text = received.decode("latin-1")
    return (int(text.split(" ", 2)[1]) if text else 0), text


def _complete(received: bytes) -> bool:
    head, _, body = received.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return True
