/* slotgate.h: C API of the slotgate Redis Cluster client (libslotgate_client).
 *
 * Why it exists: C/C++ programs get a cluster-aware client whose pipelines
 * keep their own replies, even with other threads or immediate commands on
 * the same client (the hiredis reply mix-ups of field report 004).
 *
 * Thread safety: an sg_client may be shared by any number of threads. An
 * sg_pipeline belongs to one thread at a time. Replies are owned by the
 * caller and freed with sg_free_reply (elements are owned by their parent).
 */
#ifndef SLOTGATE_H
#define SLOTGATE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct SgClient sg_client;
typedef struct SgPipeline sg_pipeline;
typedef struct SgReply sg_reply;

/* Reply types (same numbers as hiredis's REDIS_REPLY_*). */
#define SG_REPLY_STRING 1
#define SG_REPLY_ARRAY 2
#define SG_REPLY_INTEGER 3
#define SG_REPLY_NIL 4
#define SG_REPLY_STATUS 5
#define SG_REPLY_ERROR 6
#define SG_REPLY_DOUBLE 7
#define SG_REPLY_BOOL 8
#define SG_REPLY_MAP 9

/* Connects through "host:port[,host:port...]"; NULL on failure. */
sg_client *sg_connect(const char *seeds);
/* Why the last sg_connect/sg_pipeline_append on this thread failed. */
const char *sg_last_error(void);
void sg_free_client(sg_client *client);

/* One command. argvlen may be NULL for NUL-terminated arguments. Failures
 * come back as SG_REPLY_ERROR replies; NULL only for a NULL client. */
sg_reply *sg_command(const sg_client *client, int argc, const char **argv,
                     const size_t *argvlen);

/* Pipelines: append commands, execute (one SG_REPLY_ARRAY, one element per
 * command in append order), execute again if wanted, free. */
sg_pipeline *sg_pipeline_new(void);
int sg_pipeline_append(sg_pipeline *pipeline, int argc, const char **argv,
                       const size_t *argvlen);
size_t sg_pipeline_len(const sg_pipeline *pipeline);
sg_reply *sg_pipeline_execute(const sg_client *client,
                              const sg_pipeline *pipeline);
void sg_pipeline_free(sg_pipeline *pipeline);

/* Reply accessors. */
int sg_reply_type(const sg_reply *reply);
long long sg_reply_integer(const sg_reply *reply);
double sg_reply_double(const sg_reply *reply);
const char *sg_reply_str(const sg_reply *reply, size_t *len);
size_t sg_reply_len(const sg_reply *reply);
const sg_reply *sg_reply_element(const sg_reply *reply, size_t i);
void sg_free_reply(sg_reply *reply);

#ifdef __cplusplus
}
#endif

#endif /* SLOTGATE_H */
