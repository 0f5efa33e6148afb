// Names of query types, for log lines and error messages.
#include "rendezvous/protocol.hpp"

namespace ddp::rendezvous {

bool is_known_query_type(std::uint8_t byte) {
  return byte < kQueryTypeCount;
}

std::string_view query_name(QueryType type) {
  switch (type) {
    case QueryType::Validate:
      return "VALIDATE";
    case QueryType::Set:
      return "SET";
    case QueryType::CompareSet:
      return "COMPARE_SET";
    case QueryType::Get:
      return "GET";
    case QueryType::Add:
      return "ADD";
    case QueryType::Check:
      return "CHECK";
    case QueryType::Wait:
      return "WAIT";
    case QueryType::GetNumKeys:
      return "GETNUMKEYS";
    case QueryType::DeleteKey:
      return "DELETE_KEY";
    case QueryType::Append:
      return "APPEND";
    case QueryType::MultiGet:
      return "MULTI_GET";
    case QueryType::MultiSet:
      return "MULTI_SET";
    case QueryType::CancelWait:
      return "CANCEL_WAIT";
    case QueryType::Ping:
      return "PING";
    case QueryType::QueuePush:
      return "QUEUE_PUSH";
    case QueryType::QueuePop:
      return "QUEUE_POP";
    case QueryType::QueueLen:
      return "QUEUE_LEN";
    case QueryType::ListKeys:
      return "LIST_KEYS";
    case QueryType::Barrier:
      return "BARRIER";
  }
  return "UNKNOWN";
}

}  // namespace ddp::rendezvous
