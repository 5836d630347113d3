"""A lightweight component whose module exists only in its image, beside a container component whose
entrypoint exists only in its image (no ``command``: the image's ENTRYPOINT runs the args), with an output.

The image is the test's (``TEST_IMAGE``: built by tests/containers with ``only_in_image.py`` and
``/bin/custom-entrypoint.sh``)."""

import os

from kfp import dsl

IMAGE = os.environ.get("TEST_IMAGE", "localhost/millpond-test/only-in-image:1")


@dsl.component(base_image=IMAGE)
def uses_module(x: int) -> int:
    import only_in_image

    return only_in_image.VALUE + x


@dsl.container_component
def entrypoint(word: str, said: dsl.OutputPath(str)):
    return dsl.ContainerSpec(image=IMAGE, args=[word, said])


@dsl.component(base_image=IMAGE)
def both(number: int, text: str) -> str:
    return f"{number}:{text.strip()}"


@dsl.pipeline(name="only-in-image")
def only_in_image(x: int = 1) -> str:
    module = uses_module(x=x)
    said = entrypoint(word="hello")
    return both(number=module.output, text=said.output).output
