/* Helpers shared by the data tools (the .c files of src/tools); not a public API. */
#ifndef CT_TOOLS_TOOLS_COMMON_H
#define CT_TOOLS_TOOLS_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "data/db.h"

/* How often the converters log "Processed N files." (Caffe's
 * convert_imageset logs every 1000; the bulk converters every 10000). */
#define CT_TOOLS_PROGRESS_EVERY 1000
#define CT_TOOLS_PROGRESS_EVERY_BULK 10000

/* A database a tool writes: built under a temporary name beside its path
 * ("PATH.tmp.<pid>.<n>", see ct_file_temp_name) and renamed to PATH only
 * when complete, so that a tool killed half way (kill -9, a full disk, a
 * power cut) never leaves a valid-looking partial database at PATH.  The
 * temporaries of dead tools are removed when the next one starts. */
typedef struct ct_tools_out_db {
  ct_db *db;  /* write here (ct_db_put / ct_tools_put_owned) */
  char *path; /* the final path */
  char *tmp;  /* where it is built */
} ct_tools_out_db;

/* Opens a new database for path (which must not exist) under its temporary
 * name.  Errors: CT_ERR_INVALID "PATH: cannot create LMDB: the path already
 * exists"; those of ct_db_open. */
ct_status ct_tools_db_create(ct_tools_out_db *o, const char *path, ct_db_backend backend,
                             ct_error *err);
/* Ends the database of ct_tools_db_create: when st is CT_OK commits what
 * is buffered, closes it and renames it to its path; otherwise (or when that
 * fails) closes it and removes the temporary.  Returns st or the failure. */
ct_status ct_tools_db_finish(ct_tools_out_db *o, ct_status st, ct_error *err);

/* The back end of an existing database folder: LMDB when it holds data.mdb,
 * LevelDB when it holds CURRENT; `fallback` when neither (or path is
 * missing), so that opening then fails with the back end's own message. */
ct_db_backend ct_tools_detect_backend(const char *path, ct_db_backend fallback);

/* Puts one record (key of klen bytes, serialized Datum) into db and frees
 * *value (set to NULL).  Errors: those of ct_db_put. */
ct_status ct_tools_put_owned(ct_db *db, const char *key, size_t klen, uint8_t **value,
                             size_t vlen, ct_error *err);

#endif
