"""In-memory archives for the download tests."""
import io
import zipfile


def zip_bytes(files: dict[str, bytes]) -> bytes:
    """A zip archive holding ``files`` (archive path -> bytes)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return buffer.getvalue()
