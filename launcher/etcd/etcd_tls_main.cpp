// ddplaunch-etcd-tls: the TLS proxy to etcd (etcd_tls_proxy.hpp) that ddplaunch starts when
// --rdzv_conf gives TLS keys. Prints one line, "ddplaunch-etcd-tls: ports P1,P2,...", once it
// listens, and serves until it is killed (ddplaunch starts it with a parent-death signal, and
// stops it with the job). Exit codes: 2 for files that cannot be loaded, 1 for other errors.
//   ddplaunch-etcd-tls [--cacert FILE] [--cert FILE --key FILE] HOST:PORT...
#include <cstdio>
#include <iostream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "ddplaunch/common/error.hpp"
#include "launcher/etcd/etcd_tls_proxy.hpp"

int main(int argc, char** argv) {
  ddp::launcher::EtcdTlsOptions o;
  CLI::App app("TLS proxy to etcd members, started by ddplaunch");
  app.add_option("--cacert", o.ca_file, "CA certificate (PEM) that signed the members' certificates");
  app.add_option("--cert", o.cert_file, "client certificate (PEM)");
  app.add_option("--key", o.key_file, "the client certificate's private key (PEM)");
  app.add_option("members", o.members, "HOST:PORT of each etcd member")->required();
  CLI11_PARSE(app, argc, argv);
  try {
    ddp::launcher::EtcdTlsProxy proxy(o);
    std::cout << "ddplaunch-etcd-tls: ports " << fmt::format("{}", fmt::join(proxy.ports(), ",")) << std::endl;
    proxy.run();
    return 0;
  } catch (const ddp::UsageError& e) {
    std::fprintf(stderr, "ddplaunch-etcd-tls: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddplaunch-etcd-tls: %s\n", e.what());
    return 1;
  }
}
