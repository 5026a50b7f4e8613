"""The state of a results directory over time, read and kept between invocations (not
what runs inside a job: that is scalestudy.launch).

history.py     what each point's run directory holds (survey, the summary line), earlier
               records kept before a point is measured again, the kept records of a point
retry.py       --config retry_failed=true: which failed points rerun, their earlier attempts kept
locking.py     one running workflow per results directory
"""
