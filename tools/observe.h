/*
 * observe.h -- the commands that watch running engines through their live
 * pages, and the progress line of long commands.
 */
#ifndef LE_TOOLS_OBSERVE_H
#define LE_TOOLS_OBSERVE_H

/* logengine stats --live [-i SECS] [-n COUNT] DIR... (tools/live.c);
 * argv[0] is "stats". */
int cmd_stats_live(int argc, char **argv);

/* logengine serve [--listen ADDR:PORT] [--listen-any] DIR...
 * (tools/serve.c); argv[0] is "serve". */
int cmd_serve(int argc, char **argv);

#endif
