// spotps-test-stalled-push ADDRESS FILE: opens a Push stream to ADDRESS,
// sends the PushRequest serialized in FILE as its first message, says so on
// stdout and then waits with the stream open until it is killed. Lets a test
// kill a client process in the middle of a push.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "spotps/v1/parameter_server.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s ADDRESS FILE\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[2], std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  spotps::v1::PushRequest first;
  if (!in || !first.ParseFromString(bytes)) {
    std::fprintf(stderr, "cannot read a PushRequest from %s\n", argv[2]);
    return 2;
  }
  auto stub = spotps::v1::ParameterServer::NewStub(
      grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  spotps::v1::PushResponse reply;
  auto writer = stub->Push(&ctx, &reply);
  if (!writer->Write(first)) {
    std::fprintf(stderr, "the shard closed the stream\n");
    return 1;
  }
  std::printf("first message sent\n");
  std::fflush(stdout);
  for (;;) pause();
}
