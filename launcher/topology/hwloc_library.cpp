// See hwloc_library.hpp.
#include "launcher/topology/hwloc_library.hpp"

#include <dlfcn.h>

#include <string>

#include "ddplaunch/common/error.hpp"

namespace ddp::launcher {
namespace {

constexpr const char* kLibrary = "libhwloc.so.15";

HwlocLibrary load() {
  const auto fail = [](const std::string& why) {
    return Error(std::string("--numa_binding needs hwloc's library ") + kLibrary + ": " + why +
                 "; install it (Debian and Ubuntu: apt-get install libhwloc15)");
  };
  // Never closed: the library stays for the launcher's life, as a linked one would. Global:
  // hwloc's own plugins (Debian's PCI discovery, hwloc_pci.so) are not linked against it and find
  // its functions only among the global symbols, should one be loaded (the launcher keeps them
  // out: hwloc_plugins_off.hpp).
  void* library = ::dlopen(kLibrary, RTLD_NOW | RTLD_GLOBAL);
  if (library == nullptr) throw fail(::dlerror());
  const auto sym = [&](auto& field, const char* name) {
    field = reinterpret_cast<std::remove_reference_t<decltype(field)>>(::dlsym(library, name));
    if (field == nullptr) throw fail(std::string("it lacks ") + name);
  };
  unsigned (*api_version)() = nullptr;
  sym(api_version, "hwloc_get_api_version");
  // hwloc's rule: the same major ABI (the 0xff0000 bits) as the headers compiled against.
  if ((api_version() >> 16) != (HWLOC_API_VERSION >> 16)) throw fail("it is not hwloc 2");
  HwlocLibrary h{};
  sym(h.topology_init, "hwloc_topology_init");
  sym(h.topology_destroy, "hwloc_topology_destroy");
  sym(h.topology_set_xml, "hwloc_topology_set_xml");
  sym(h.topology_set_io_types_filter, "hwloc_topology_set_io_types_filter");
  sym(h.topology_set_type_filter, "hwloc_topology_set_type_filter");
  sym(h.topology_set_components, "hwloc_topology_set_components");  // hwloc 2.1 and later
  sym(h.topology_load, "hwloc_topology_load");
  sym(h.get_obj_by_depth, "hwloc_get_obj_by_depth");
  sym(h.bitmap_first, "hwloc_bitmap_first");
  return h;
}

}  // namespace

const HwlocLibrary& HwlocLibrary::get() {
  static const HwlocLibrary library = load();
  return library;
}

}  // namespace ddp::launcher
