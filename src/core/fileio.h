/* Whole-file reads and crash-safe whole-file writes.
 *
 * Every model, solver state and checkpoint file goes through
 * ct_file_write_atomic, so a crash or a full disk in the middle of a write
 * leaves either the old file or the new one at the path, never a torn one. */
#ifndef CT_CORE_FILEIO_H
#define CT_CORE_FILEIO_H

#include <stddef.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the whole file at `path`.
 *
 * On success *data is a malloc'd buffer of *len bytes followed by one extra
 * '\0' (so text can be used as a C string); the caller frees it.  Files larger
 * than max_len bytes are refused before anything is read.
 *
 * Errors (messages start with the path):
 *   CT_ERR_NOTFOUND  "PATH: cannot open: No such file or directory"
 *   CT_ERR_IO        "PATH: cannot open: <reason>", "PATH: is a directory",
 *                    "PATH: read failed: <reason>"
 *   CT_ERR_INVALID   "PATH: file too large (N bytes; the limit is M bytes)"
 * On failure *data is NULL and *len is 0. */
ct_status ct_file_read_all(const char *path, char **data, size_t *len, size_t max_len,
                           ct_error *err);

/* Replaces the file at `path` with `len` bytes of `data`, atomically.
 *
 * Writes a temporary file "PATH.tmp.<pid>.<n>" in the same folder (created
 * with the usual 0666 & ~umask permissions), fsyncs it, renames it over
 * `path`, then fsyncs the folder so the rename itself survives a crash.
 * On any failure the temporary file is removed and `path` is left as it was.
 *
 * Errors: CT_ERR_IO with "PATH: <step> failed: <reason>", where step is one
 * of create, write, fsync, close, rename, fsync folder. */
ct_status ct_file_write_atomic(const char *path, const void *data, size_t len, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
