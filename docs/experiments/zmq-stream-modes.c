// Does a stream's rate depend on the socket types, on sleeping in epoll, or on the frames
// per message? Raw libzmq, no RunLoopKit code: 1,000,000 messages over inproc from a
// sender on CPU 1 to a receiver on CPU 0 (runloopkit-bench's placement), high-water marks
// of 10,000 (RunLoopKit's). The payload is one 93-byte frame or RunLoopKit's three frames
// (a 21-byte header, an empty reply address, 64 bytes of data).
//
//   cc -O2 -o /tmp/zmq-stream-modes docs/experiments/zmq-stream-modes.c -lzmq -lpthread
//   /tmp/zmq-stream-modes ROUTER EPOLL FRAMES
//     ROUTER 0: PUSH to PULL; 1: DEALER to ROUTER (RunLoopKit's sockets)
//     EPOLL  0: blocking send and receive; 1: ZMQ_DONTWAIT, sleeping in epoll on ZMQ_FD
//               until ZMQ_EVENTS says ready (RunLoopKit's design)
//     FRAMES 1 or 3
#define _GNU_SOURCE
#include <zmq.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
static int N=1000000, router, polling, frames, hwm=10000;
static void *ctx,*rsock;
static void pin(int cpu){cpu_set_t s;CPU_ZERO(&s);CPU_SET(cpu,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static int efd_for(void*s){int e=epoll_create1(0),fd;size_t l=sizeof fd;zmq_getsockopt(s,ZMQ_FD,&fd,&l);struct epoll_event ev={.events=EPOLLIN};epoll_ctl(e,EPOLL_CTL_ADD,fd,&ev);return e;}
static void wait_ev(void*s,int e,int want){for(;;){int ev;size_t l=sizeof ev;zmq_getsockopt(s,ZMQ_EVENTS,&ev,&l);if(ev&want)return;struct epoll_event x;epoll_wait(e,&x,1,-1);}}
static void *receiver(void*a){pin(0);char b[256];int e=efd_for(rsock);int parts=frames+(router?1:0);
  for(int i=0;i<N;i++){ if(polling){ while(zmq_recv(rsock,b,256,ZMQ_DONTWAIT)<0) wait_ev(rsock,e,ZMQ_POLLIN); for(int p=1;p<parts;p++) zmq_recv(rsock,b,256,ZMQ_DONTWAIT);} else for(int p=0;p<parts;p++) zmq_recv(rsock,b,256,0);} return 0;}
int main(int c,char**v){router=atoi(v[1]);polling=atoi(v[2]);frames=atoi(v[3]);
  ctx=zmq_ctx_new();rsock=zmq_socket(ctx,router?ZMQ_ROUTER:ZMQ_PULL);zmq_setsockopt(rsock,ZMQ_RCVHWM,&hwm,4);zmq_bind(rsock,"inproc://x");
  void*s=zmq_socket(ctx,router?ZMQ_DEALER:ZMQ_PUSH);zmq_setsockopt(s,ZMQ_SNDHWM,&hwm,4);zmq_connect(s,"inproc://x");
  pin(1);int e=efd_for(s);char m[93];memset(m,7,93);pthread_t t;double t0=now();pthread_create(&t,0,receiver,0);
  for(int i=0;i<N;i++){ if(frames==1){ if(polling){while(zmq_send(s,m,93,ZMQ_DONTWAIT)<0)wait_ev(s,e,ZMQ_POLLOUT);} else zmq_send(s,m,93,0);}
    else { if(polling){while(zmq_send(s,m,21,ZMQ_DONTWAIT|ZMQ_SNDMORE)<0)wait_ev(s,e,ZMQ_POLLOUT);} else zmq_send(s,m,21,ZMQ_SNDMORE);
      zmq_send(s,m,0,ZMQ_SNDMORE|(polling?ZMQ_DONTWAIT:0)); zmq_send(s,m,64,polling?ZMQ_DONTWAIT:0);} }
  pthread_join(t,0);printf("%s %s %d frame(s): %.2f M/s\n",router?"dealer/router":"push/pull  ",polling?"epoll   ":"blocking",frames,N/(now()-t0)/1e6);return 0;}
