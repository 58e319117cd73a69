/*
 * ost_log.c - logging module (docs/contract.md §1.10, §8).
 *
 * Backends, chosen lazily while no callback is registered:
 *   1. file  : OST_LOG_FILE_PATH, opened O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC, mode 0644 (final);
 *   2. syslog: when /dev/log, /run/systemd/journal/dev-log or /run/systemd/journal/syslog exists;
 *   3. silent otherwise.
 * Disabled/syslog are re-evaluated on every message (getenv and, while disabled, up to 3 stat calls),
 * under the log mutex, before the level filter: this is the original's cost profile (§10 #23).
 * Registering a callback is final: it closes the file or syslog connection.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "ost_log.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define OST_LOG_TEXT_MAX 1024 /* formatted text: at most 1023 bytes */
#define OST_LOG_LINE_MAX 1408 /* whole line: at most 1407 bytes */
#define OST_LOG_FILE_ENV "OST_LOG_FILE_PATH"

typedef enum {
    OST_LOG_BACKEND_DISABLED = 0,
    OST_LOG_BACKEND_SYSLOG = 1,
    OST_LOG_BACKEND_FILE = 2,
    OST_LOG_BACKEND_CALLBACK = 3,
} ost_log_backend_t;

static pthread_mutex_t g_log_mutex = PTHREAD_MUTEX_INITIALIZER;
static ost_log_backend_t g_log_backend = OST_LOG_BACKEND_DISABLED;
static int g_log_fd = -1;
static int g_log_level = GLOBAL_LOG_LEVEL;
static log_callback_t g_log_cb = NULL;

static const char *const g_syslog_paths[] = {
    "/dev/log",
    "/run/systemd/journal/dev-log",
    "/run/systemd/journal/syslog",
};

/* Called with g_log_mutex held. Moves the backend up the order disabled/syslog -> file. */
static void ost_log_select_backend_locked(void)
{
    const char *path;
    size_t i;
    struct stat st;

    if (g_log_backend == OST_LOG_BACKEND_FILE || g_log_backend == OST_LOG_BACKEND_CALLBACK) {
        return;
    }
    path = getenv(OST_LOG_FILE_ENV);
    if (path != NULL && path[0] != '\0') {
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            if (g_log_backend == OST_LOG_BACKEND_SYSLOG) {
                closelog();
            }
            g_log_fd = fd;
            g_log_backend = OST_LOG_BACKEND_FILE;
            return;
        }
    }
    if (g_log_backend == OST_LOG_BACKEND_SYSLOG) {
        return;
    }
    for (i = 0; i < sizeof(g_syslog_paths) / sizeof(g_syslog_paths[0]); i++) {
        if (stat(g_syslog_paths[i], &st) == 0) {
            openlog("os_transport", LOG_PID | LOG_NDELAY, LOG_USER);
            g_log_backend = OST_LOG_BACKEND_SYSLOG;
            return;
        }
    }
}

static const char *ost_log_level_name(int level)
{
    switch (level) {
    case OST_LOG_LEVEL_DEBUG:
        return "DEBUG";
    case OST_LOG_LEVEL_INFO:
        return "INFO";
    case OST_LOG_LEVEL_WARN:
        return "WARN";
    case OST_LOG_LEVEL_ERROR:
        return "ERROR";
    default:
        return level < OST_LOG_LEVEL_DEBUG ? "DEBUG" : "ERROR";
    }
}

static int ost_log_syslog_priority(int level)
{
    if (level <= OST_LOG_LEVEL_DEBUG) {
        return LOG_DEBUG;
    }
    if (level == OST_LOG_LEVEL_INFO) {
        return LOG_INFO;
    }
    if (level == OST_LOG_LEVEL_WARN) {
        return LOG_WARNING;
    }
    return LOG_ERR;
}

/* "YYYY-MM-DDTHH:MM:SS.mmm [LEVEL] [pid=P tid=T] [ost:<file>:<line>] <text>\n" (local time). */
static void ost_log_write_file_locked(int level, const char *file, int line, const char *text)
{
    char buf[OST_LOG_LINE_MAX];
    char stamp[32];
    struct timespec ts;
    struct tm tm_local;
    int n;
    int fd;
    size_t len;

    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm_local);
    if (strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm_local) == 0) {
        stamp[0] = '\0';
    }
    n = snprintf(buf, sizeof(buf), "%s.%03ld [%s] [pid=%ld tid=%ld] [ost:%s:%d] %s\n", stamp,
                 (long)(ts.tv_nsec / 1000000), ost_log_level_name(level), (long)getpid(),
                 (long)syscall(SYS_gettid), file, line, text);
    if (n < 0) {
        return;
    }
    len = (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1;
    fd = dup(g_log_fd);
    if (fd < 0) {
        return;
    }
    if (write(fd, buf, len) < 0) {
        /* nothing sensible to do: logging must never fail the caller */
    }
    close(fd);
}

void ost_log_write(int level, int vlevel, const char *file, int line, const char *fmt, ...)
{
    char text[OST_LOG_TEXT_MAX];
    char msg[OST_LOG_LINE_MAX];
    log_callback_t cb = NULL;
    ost_log_backend_t backend;
    int threshold;
    va_list ap;

    pthread_mutex_lock(&g_log_mutex);
    ost_log_select_backend_locked();
    backend = g_log_backend;
    threshold = g_log_level;
    if (level < threshold || backend == OST_LOG_BACKEND_DISABLED) {
        pthread_mutex_unlock(&g_log_mutex);
        return;
    }

    va_start(ap, fmt);
    (void)vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);

    switch (backend) {
    case OST_LOG_BACKEND_FILE:
        ost_log_write_file_locked(level, file, line, text);
        pthread_mutex_unlock(&g_log_mutex);
        return;
    case OST_LOG_BACKEND_SYSLOG:
        (void)snprintf(msg, sizeof(msg), "[ost:%s:%d] %s\n", file, line, text);
        syslog(ost_log_syslog_priority(level), "%s", msg);
        pthread_mutex_unlock(&g_log_mutex);
        return;
    case OST_LOG_BACKEND_CALLBACK:
        cb = g_log_cb;
        pthread_mutex_unlock(&g_log_mutex);
        break;
    default:
        pthread_mutex_unlock(&g_log_mutex);
        return;
    }

    /* The callback runs outside the log mutex. */
    (void)snprintf(msg, sizeof(msg), "[ost:%s:%d] %s\n", file, line, text);
    cb((int)((unsigned)(level & 0xFF) | ((unsigned)(vlevel & 0xFF) << 8)), msg);
}

int ost_log_register_callback(int level, log_callback_t cb)
{
    if (cb == NULL) {
        return -1;
    }
    pthread_mutex_lock(&g_log_mutex);
    if (g_log_backend == OST_LOG_BACKEND_FILE && g_log_fd >= 0) {
        close(g_log_fd);
        g_log_fd = -1;
    } else if (g_log_backend == OST_LOG_BACKEND_SYSLOG) {
        closelog();
    }
    g_log_cb = cb;
    g_log_level = level;
    g_log_backend = OST_LOG_BACKEND_CALLBACK;
    pthread_mutex_unlock(&g_log_mutex);
    return 0;
}
