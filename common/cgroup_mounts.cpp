// See cgroup_mounts.hpp.
#include "common/cgroup_mounts.hpp"

#include <linux/magic.h>
#include <sys/vfs.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace ddp {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> items;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, sep);) items.push_back(item);
  return items;
}

// This process's path in the hierarchy of `mount`, "" if /proc/self/cgroup has no line for it.
std::string hierarchy_path(const CgroupMount& mount, const std::string& cgroup) {
  std::ifstream in(cgroup);
  // Lines: hierarchy-id:controller-list:path (v2: "0::/path").
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (mount.v2) {
      if (line.compare(0, second + 1, "0::") == 0) return path;
      continue;
    }
    const std::vector<std::string> listed = split(controllers, ',');
    const bool same = !mount.controllers.empty() &&
                      std::all_of(mount.controllers.begin(), mount.controllers.end(), [&](const std::string& c) {
                        return std::find(listed.begin(), listed.end(), c) != listed.end();
                      });
    if (same) return path;
  }
  return "";
}

}  // namespace

std::vector<CgroupMount> cgroup_mounts(const std::string& mountinfo) {
  std::vector<CgroupMount> mounts;
  std::ifstream in(mountinfo);
  // Fields: id parent major:minor root mount-point options [optional...] - fstype source super-options
  for (std::string line; std::getline(in, line);) {
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype, source, options;
    if (!(tail >> fstype >> source >> options) || (fstype != "cgroup2" && fstype != "cgroup")) continue;
    std::istringstream fields(line.substr(0, dash));
    CgroupMount m;
    std::string id, parent, dev;
    if (!(fields >> id >> parent >> dev >> m.root >> m.mount_point)) continue;
    m.v2 = fstype == "cgroup2";
    if (!m.v2) {
      for (const std::string& o : split(options, ',')) {
        if (o != "rw" && o != "ro" && o.find('=') == std::string::npos && o.rfind("no", 0) != 0 &&
            o != "clone_children")
          m.controllers.push_back(o);
      }
    }
    mounts.push_back(std::move(m));
  }
  return mounts;
}

std::string own_cgroup_dir(const CgroupMount& mount, const std::string& cgroup) {
  std::string path = hierarchy_path(mount, cgroup);
  if (path.empty()) return "";
  if (mount.root != "/") {
    // A container's bind of part of the hierarchy: only paths under its root are visible.
    if (path.compare(0, mount.root.size(), mount.root) != 0 ||
        (path.size() > mount.root.size() && path[mount.root.size()] != '/'))
      return "";
    path = path.substr(mount.root.size());
  }
  if (path == "/") path.clear();
  return mount.mount_point + path;
}

std::string cgroup2_mount_point() {
  // The two places systems mount it (unified; hybrid), one statfs each: generating
  // /proc/self/mountinfo costs the kernel about 0.1 ms, a tenth of a one-worker launch's own work.
  for (const char* usual : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    struct statfs fs {};
    if (::statfs(usual, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC) return usual;
  }
  for (const CgroupMount& m : cgroup_mounts())
    if (m.v2) return m.mount_point;
  return "";
}

std::string own_cgroup2_path() {
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "";
}

}  // namespace ddp
