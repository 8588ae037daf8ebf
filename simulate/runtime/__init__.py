"""The plumbing every command shares, none of it about transformers: process set-up, the machine's memory,
interrupts, lazy exports, code versions and keys.

- :mod:`~simulate.runtime.process`: :func:`~simulate.runtime.process.configure_process` (threads,
  allocator, before torch is loaded);
- :mod:`~simulate.runtime.machine`: what the machine (or the CUDA device) has, and the one-line
  refusal when a command would not fit;
- :mod:`~simulate.runtime.interrupts`: SIGINT/SIGTERM handling that keeps what was complete;
- :mod:`~simulate.runtime.lazy`: names of a package loaded on first use;
- :mod:`~simulate.runtime.versions`: code versions as digests of the sources that decide a result;
- :mod:`~simulate.runtime.keys`: the one key builder (a request with its code version, corpus digest,
  Python and torch).

Nothing here imports torch or any other part of ``simulate``; import the modules themselves.
"""
