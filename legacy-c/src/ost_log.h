/*
 * ost_log.h - logging module of the os_transport 1.0 C reference (docs/contract.md §8).
 *
 * Levels: DEBUG = -1, INFO = 0, WARN = 1, ERROR = 2. INFO/WARN/ERROR carry verbosity -1,
 * DEBUG carries the verbosity given by the call site (the library uses 1 and 2). The value handed
 * to a log callback is (level & 0xFF) | ((vlevel & 0xFF) << 8).
 *
 * Every library message body starts with "[PIPLN RH2D] ". The macros below prepend it, so their
 * first argument must be a string literal.
 */
#ifndef OST_LOG_H
#define OST_LOG_H

#include "os_transport.h"

#define OST_LOG_LEVEL_DEBUG (-1)
#define OST_LOG_LEVEL_INFO 0
#define OST_LOG_LEVEL_WARN 1
#define OST_LOG_LEVEL_ERROR 2

/* Default threshold: DEBUG, so everything passes until a callback sets another level. */
#ifndef GLOBAL_LOG_LEVEL
#define GLOBAL_LOG_LEVEL OST_LOG_LEVEL_DEBUG
#endif

#ifdef __FILE_NAME__
#define OST_LOG_FILE __FILE_NAME__
#else
#define OST_LOG_FILE __FILE__
#endif

#define OST_LOG_BODY_PREFIX "[PIPLN RH2D] "

/* printf-style entry point (the original exported it as ost_log_write; here it is hidden). */
void ost_log_write(int level, int vlevel, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Implementation of os_transport_log_reg(). */
int ost_log_register_callback(int level, log_callback_t cb);

#define OST_LOG_DEBUG(v, ...) \
    ost_log_write(OST_LOG_LEVEL_DEBUG, (v), OST_LOG_FILE, __LINE__, OST_LOG_BODY_PREFIX __VA_ARGS__)
#define OST_LOG_INFO(...) \
    ost_log_write(OST_LOG_LEVEL_INFO, -1, OST_LOG_FILE, __LINE__, OST_LOG_BODY_PREFIX __VA_ARGS__)
#define OST_LOG_WARN(...) \
    ost_log_write(OST_LOG_LEVEL_WARN, -1, OST_LOG_FILE, __LINE__, OST_LOG_BODY_PREFIX __VA_ARGS__)
#define OST_LOG_ERROR(...) \
    ost_log_write(OST_LOG_LEVEL_ERROR, -1, OST_LOG_FILE, __LINE__, OST_LOG_BODY_PREFIX __VA_ARGS__)

#endif /* OST_LOG_H */
