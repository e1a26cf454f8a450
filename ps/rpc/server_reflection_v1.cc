#include "ps/rpc/server_reflection_v1.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/impl/server_initializer.h>

#include <set>

#include "absl/strings/str_cat.h"

namespace spotps {
namespace {

using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;
using grpc::reflection::v1::ServerReflectionRequest;
using grpc::reflection::v1::ServerReflectionResponse;

// `file` and, depth first, every file it imports, each once.
void AddFileAndDependencies(const FileDescriptor* file, std::set<std::string>* added,
                            grpc::reflection::v1::FileDescriptorResponse* out) {
  if (!added->insert(file->name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  out->add_file_descriptor_proto(proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i) {
    AddFileAndDependencies(file->dependency(i), added, out);
  }
}

void SetError(grpc::StatusCode code, const std::string& message, ServerReflectionResponse* r) {
  r->mutable_error_response()->set_error_code(code);
  r->mutable_error_response()->set_error_message(message);
}

// Answers with `file`'s descriptors, or NOT_FOUND naming `what`.
void AnswerFile(const FileDescriptor* file, const std::string& what,
                ServerReflectionResponse* r) {
  if (file == nullptr) {
    SetError(grpc::StatusCode::NOT_FOUND, absl::StrCat(what, " not found"), r);
    return;
  }
  std::set<std::string> added;
  AddFileAndDependencies(file, &added, r->mutable_file_descriptor_response());
}

class ReflectionV1Plugin final : public grpc::ServerBuilderPlugin {
 public:
  std::string name() override { return "spotps_reflection_v1"; }
  void InitServer(grpc::ServerInitializer* si) override { si->RegisterService(service_); }
  void Finish(grpc::ServerInitializer* si) override {
    service_->SetServices(*si->GetServiceList());
  }
  void ChangeArguments(const std::string&, void*) override {}
  bool has_sync_methods() const override { return true; }

 private:
  std::shared_ptr<ServerReflectionV1> service_ = std::make_shared<ServerReflectionV1>();
};

class ReflectionV1Option final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->push_back(std::make_unique<ReflectionV1Plugin>());
  }
};

}  // namespace

void ServerReflectionV1::SetServices(std::vector<std::string> services) {
  absl::MutexLock lock(&mu_);
  services_ = std::move(services);
}

ServerReflectionResponse ServerReflectionV1::Answer(const ServerReflectionRequest& request) const {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  ServerReflectionResponse r;
  r.set_valid_host(request.host());
  *r.mutable_original_request() = request;
  switch (request.message_request_case()) {
    case ServerReflectionRequest::kFileByFilename:
      AnswerFile(pool->FindFileByName(request.file_by_filename()),
                 absl::StrCat("file ", request.file_by_filename()), &r);
      break;
    case ServerReflectionRequest::kFileContainingSymbol:
      AnswerFile(pool->FindFileContainingSymbol(request.file_containing_symbol()),
                 absl::StrCat("symbol ", request.file_containing_symbol()), &r);
      break;
    case ServerReflectionRequest::kFileContainingExtension: {
      const auto& e = request.file_containing_extension();
      const google::protobuf::Descriptor* type = pool->FindMessageTypeByName(e.containing_type());
      const google::protobuf::FieldDescriptor* extension =
          type == nullptr ? nullptr : pool->FindExtensionByNumber(type, e.extension_number());
      AnswerFile(extension == nullptr ? nullptr : extension->file(),
                 absl::StrCat("extension ", e.extension_number(), " of ", e.containing_type()),
                 &r);
      break;
    }
    case ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const google::protobuf::Descriptor* type =
          pool->FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (type == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("type ", request.all_extension_numbers_of_type(), " not found"), &r);
        break;
      }
      std::vector<const google::protobuf::FieldDescriptor*> extensions;
      pool->FindAllExtensions(type, &extensions);
      auto* numbers = r.mutable_all_extension_numbers_response();
      numbers->set_base_type_name(type->full_name());
      for (const auto* x : extensions) numbers->add_extension_number(x->number());
      break;
    }
    case ServerReflectionRequest::kListServices: {
      absl::MutexLock lock(&mu_);
      for (const std::string& name : services_) {
        r.mutable_list_services_response()->add_service()->set_name(name);
      }
      break;
    }
    default:
      SetError(grpc::StatusCode::UNIMPLEMENTED, "the request names no known question", &r);
  }
  return r;
}

grpc::Status ServerReflectionV1::ServerReflectionInfo(
    grpc::ServerContext*,
    grpc::ServerReaderWriter<ServerReflectionResponse, ServerReflectionRequest>* stream) {
  ServerReflectionRequest request;
  while (stream->Read(&request)) {
    if (!stream->Write(Answer(request))) break;
  }
  return grpc::Status::OK;
}

std::unique_ptr<grpc::ServerBuilderOption> ServerReflectionV1Option() {
  return std::make_unique<ReflectionV1Option>();
}

}  // namespace spotps
