// --run_path: what a worker runs for it. torchrun runs `run_script_path` as a function worker in
// a multiprocessing child of its agent: sys.argv = [script, args...], then
// runpy.run_path(script, run_name="__main__"), under @record, which writes an uncaught exception
// to TORCHELASTIC_ERROR_FILE. ddplaunch's workers are their own processes, so each runs
// `python -u -c <kRunPathCode> script args...`, which does the same in a fresh interpreter. What
// the user sees is what torchrun gives: __name__ == "__main__", the same sys.argv, the script's
// directory NOT put first on sys.path (run_path does not add it; `python script.py` would), and
// the error file written without @record in the script.
#pragma once

namespace ddp::launcher {

// The Python code run with -c; its arguments are the script and the script's arguments. One line
// (the body is exec'd from a string), so that ps and --dry-run show it on one.
inline constexpr const char* kRunPathCode =
    R"py(import sys;exec("import json,os,runpy,time,traceback\nsys.argv=sys.argv[1:]\ntry:\n runpy.run_path(sys.argv[0],run_name='__main__')\nexcept Exception as e:\n p=os.environ.get('TORCHELASTIC_ERROR_FILE')\n if p:\n  with open(p,'w') as f:json.dump({'message':{'message':f'{type(e).__name__}: {e}','extraInfo':{'py_callstack':traceback.format_exc(),'timestamp':str(int(time.time()))}}},f)\n raise"))py";

}  // namespace ddp::launcher
