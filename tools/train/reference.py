"""tools/reference's UNet and st_io, importable from tools/train (one sys.path entry, set here only)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "reference"))
import st_io  # noqa: E402,F401
from unet import UNet  # noqa: E402,F401
