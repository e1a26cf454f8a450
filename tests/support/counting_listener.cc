#include "tests/support/counting_listener.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace spotps::testing {

CountingListener::CountingListener() {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd_, 16) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return;  // port() stays 0: a test's connection attempts then fail loudly.
  }
  port_ = ntohs(a.sin_port);
}

CountingListener::~CountingListener() {
  if (fd_ >= 0) close(fd_);
}

int CountingListener::Accepted() {
  int n = 0;
  while (true) {
    const int c = accept(fd_, nullptr, nullptr);
    if (c < 0) return n;
    close(c);
    ++n;
  }
}

}  // namespace spotps::testing
