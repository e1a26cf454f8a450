// CountingListener: a TCP port that accepts connections and counts them, for
// tests that must show a program made no connection at all.
#ifndef SPOTPS_TESTS_SUPPORT_COUNTING_LISTENER_H_
#define SPOTPS_TESTS_SUPPORT_COUNTING_LISTENER_H_

namespace spotps::testing {

// Owns a listening socket on 127.0.0.1 (a free port). Never answers: a
// connection is accepted and closed when counted.
class CountingListener {
 public:
  CountingListener();
  ~CountingListener();
  CountingListener(const CountingListener&) = delete;
  CountingListener& operator=(const CountingListener&) = delete;

  int port() const { return port_; }
  // Connections made since the last call.
  int Accepted();

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace spotps::testing

#endif  // SPOTPS_TESTS_SUPPORT_COUNTING_LISTENER_H_
