# A stand-in for tensorflow/tensorflow:1.14.0-py3 as seed 003's my_divmod uses it: Python with numpy.
ARG BASE
FROM ${BASE}
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3-numpy >/dev/null && rm -rf /var/lib/apt/lists/*
