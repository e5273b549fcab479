"""rankkit's one file layer: every reader and writer of the package goes through it.

* :mod:`~rankkit.files.reading`: strict UTF-8 lines, gzip by content, one-line ``FILE:LINE`` errors;
* :mod:`~rankkit.files.writing`: atomic outputs (temporary + rename; streams written through):
  ``atomic_write`` for text, ``atomic_path`` for writers that need a file name (faiss, safetensors,
  numpy, ONNX/OpenVINO exports);
* :mod:`~rankkit.files.failures`: a full disk, quota, read-only file system or I/O error while
  writing as one line naming the output (exit 1); ``reserve`` before a memory map;
* :mod:`~rankkit.files.temporaries`: locked, marked temporaries and folders (``staging_dir``,
  ``scratch_path``), and the removal of those a killed run left;
* :mod:`~rankkit.files.locks`: one process at a time on a shared output folder or cache entry;
* :mod:`~rankkit.files.limits`: bounded reading of files written by others (size, links, nesting);
* :mod:`~rankkit.files.checks`: output checks made before any work;
* :mod:`~rankkit.files.hashing`: the one file hash (SHA-256, streamed);
* :mod:`~rankkit.files.paths`: path types, stream detection, the cache root.
"""

from rankkit.files.checks import check_output, check_output_dir, check_outputs
from rankkit.files.failures import ENVIRONMENT_ERRNOS, reserve, write_failure, writing_to
from rankkit.files.hashing import file_sha256, update_with_file
from rankkit.files.locks import ResourceBusy, exclusive
from rankkit.files.paths import PathLike, first_existing, is_gzip, is_stream, user_cache_root
from rankkit.files.reading import (
    GZIP_MAGIC, UTF8_BOM, check_encodable, decode_line, is_gzip_file, iter_lines, iter_raw_lines, max_line, open_binary,
    open_text, parse_json_object,
)
from rankkit.files.temporaries import (
    TEMP_MARK, install_cache_folder, remove_stale_temporaries, remove_tree, scratch_path, staging_dir, temporary_path,
)
from rankkit.files.writing import atomic_path, atomic_write

__all__ = [
    "ENVIRONMENT_ERRNOS", "GZIP_MAGIC", "TEMP_MARK", "UTF8_BOM", "atomic_path", "atomic_write", "check_encodable",
    "check_output", "check_output_dir", "check_outputs", "decode_line", "exclusive", "file_sha256",
    "first_existing", "is_gzip", "is_gzip_file", "is_stream", "iter_lines", "iter_raw_lines", "max_line",
    "open_binary", "open_text", "parse_json_object", "PathLike", "remove_stale_temporaries", "remove_tree",
    "reserve", "ResourceBusy", "install_cache_folder", "scratch_path", "staging_dir", "temporary_path", "update_with_file",
    "user_cache_root", "write_failure", "writing_to",
]
