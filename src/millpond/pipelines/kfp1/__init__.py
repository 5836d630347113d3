"""KFP v1 source files: recognise kfp 1.x code and compile it with kfp 1.8 in a side environment.

kfp 1.x and kfp 2.x cannot share one environment (both are the ``kfp`` package), and millpond
runs on kfp 2. So a ``.py`` file written for kfp 1.x is recognised before kfp 2 imports it
(``detect``: an AST scan for names only kfp 1.x has; a kfp 2 import error naming one of them
is the fallback) and compiled by ``compile_v1.py`` under kfp 1.8.22's own interpreter, a
virtual environment cached under the user's cache folder (``side_env``). Its Argo workflow then
takes the path of any compiled v1 pipeline (``loader.load_ir_text``).
"""
