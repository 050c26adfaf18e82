"""TorchBind classes (C++ ``torch::class_`` with a fake from ``torch._library.register_fake_class``): discovery, the class context, calls, example objects and the differential test."""
