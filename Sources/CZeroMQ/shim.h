// libzmq's public header, exposed to Swift unchanged. Every call into it goes
// through RunLoopKit's ZMQ layer (Sources/RunLoopKit/ZMQ), never from elsewhere.
#include <zmq.h>
