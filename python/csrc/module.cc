// The Python module coll_torch._C: the backend class, constructed by coll_torch's creator.
#include <torch/csrc/utils/pybind.h>
#include <torch/python.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "backend.h"

namespace py = pybind11;

namespace {

c10::intrusive_ptr<coll_torch::CollBackend> create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                   int64_t timeoutMs, const std::string& name, int device) {
  return c10::make_intrusive<coll_torch::CollBackend>(store, rank, size, std::chrono::milliseconds(timeoutMs), name,
                                                      device);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "coll as a torch.distributed backend (import coll_torch registers it as \"coll\")";
  py::class_<coll_torch::CollBackend, c10d::Backend, c10::intrusive_ptr<coll_torch::CollBackend>>(m, "CollBackend")
      .def(py::init(&create), py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"),
           py::arg("name"), py::arg("device") = -1, py::call_guard<py::gil_scoped_release>(),
           "Joins the group: rendezvous through store, then a coll communicator of size ranks, bound to CUDA "
           "device `device` (-1: host-only until the first CUDA collective).")
      .def(
          "perform_nocolor_split", [](coll_torch::CollBackend& b, py::object) { b.performNocolorSplit(); },
          py::arg("device"), py::call_guard<py::gil_scoped_release>(),
          "Takes part in a split of this group as a rank that joins no new group.")
      .def(
          "split",
          [](coll_torch::CollBackend& b, const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
             const std::string& name, int64_t timeoutMs) {
            auto o = c10::make_intrusive<c10d::Backend::Options>("coll", std::chrono::milliseconds(timeoutMs));
            o->group_name = name;
            return b.split(store, ranks, o);
          },
          py::arg("store"), py::arg("ranks"), py::arg("name"), py::arg("timeout_ms"),
          py::call_guard<py::gil_scoped_release>(),
          "collCommSplit: ranks (ranks of this group) form the new group; None on the ranks not in it.");
  m.def(
      "version",
      [] {
        int v = 0;
        collGetVersion(&v);
        return v;
      },
      "COLL_VERSION_CODE of the loaded libcoll.");
}
