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
 * '\0' (so text can be used as a C string); the caller frees it.  Only
 * regular files are read: a FIFO, a device (/dev/zero), a socket or a
 * folder is refused before anything is read (opening does not wait for a
 * FIFO's writer), and files larger than max_len bytes are refused by their
 * size.  Every model, solver state, prototxt and list file of Cortado is
 * read here, so this is the one place of that check.
 *
 * Errors (messages start with the path):
 *   CT_ERR_NOTFOUND  "PATH: cannot open: No such file or directory"
 *   CT_ERR_IO        "PATH: cannot open: <reason>", "PATH: is a directory",
 *                    "PATH: not a regular file (it is a FIFO (named pipe));
 *                    refused before reading", "PATH: read failed: <reason>"
 *   CT_ERR_INVALID   "PATH: file too large (N bytes; the limit is M bytes)"
 *   CT_ERR_NOMEM     "PATH: out of memory reading N bytes"
 * On failure *data is NULL and *len is 0. */
ct_status ct_file_read_all(const char *path, char **data, size_t *len, size_t max_len,
                           ct_error *err);

/* What a stat mode is, for messages: "a regular file", "a FIFO (named
 * pipe)", "a character device", ... (a static string). */
const char *ct_file_kind(unsigned mode);

/* Replaces the file at `path` with `len` bytes of `data`, atomically.
 *
 * Writes a temporary file "PATH.tmp.<pid>.<n>" in the same folder (created
 * with the usual 0666 & ~umask permissions, locked with flock while it is
 * written), fsyncs it, renames it over `path`, then fsyncs the folder so the
 * rename itself survives a crash.  On any failure the temporary file is
 * removed and `path` is left as it was.  Temporaries of `path` that a dead
 * process left behind (ct_file_remove_stale_temps) are removed first.
 *
 * Errors: CT_ERR_IO with "PATH: <step> failed: <reason>", where step is one
 * of create, write, fsync, close, rename, fsync folder. */
ct_status ct_file_write_atomic(const char *path, const void *data, size_t len, ct_error *err);

/* fsync of the folder holding path, so that a rename into it is durable.
 * Errors: CT_ERR_IO "PATH: fsync folder failed: <reason>". */
ct_status ct_file_sync_parent(const char *path, ct_error *err);

/* A fresh temporary name beside path: "PATH.tmp.<pid>.<n>" (n counts up in
 * this process).  Caller frees.  ct_file_remove_stale_temps knows the form. */
char *ct_file_temp_name(const char *path);

/* Removes the temporaries "<PREFIX...>.tmp.<pid>.<n>" (files or folders)
 * beside path_prefix whose names start with its base name and whose writer
 * is gone: no process <pid> runs on this machine and (for files) no process
 * holds the flock that ct_file_write_atomic takes.  E.g. with path_prefix
 * "snap/run_iter_" the torn "snap/run_iter_500.caffemodel.tmp.4711.0" of a
 * run killed with kill -9.  Each removal is logged (INFO).  Returns how many
 * were removed; failures to remove are logged warnings. */
int ct_file_remove_stale_temps(const char *path_prefix);

/* Removes the file or folder at path and everything under it (not following
 * links).  Failures are logged warnings. */
void ct_file_remove_tree(const char *path);

#ifdef __cplusplus
}
#endif

#endif
