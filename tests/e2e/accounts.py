"""What an operator's Slurm accounting holds, for the lab tests that move it."""

# A QOS with limits, an account, a user in it.
ACCOUNTS = (
    "sacctmgr -i add qos e2e_long Priority=10 MaxWall=2-00:00:00 Flags=DenyOnLimit"
    " Description=long-jobs"
    " && sacctmgr -i add account e2e_team Description=team Organization=lab"
    " && sacctmgr -i add user e2e_alice Account=e2e_team QOS=normal,e2e_long"
    " DefaultQOS=normal MaxJobs=7 Fairshare=3"
)
REMOVE_ACCOUNTS = (
    "sacctmgr -i remove user e2e_alice; sacctmgr -i remove account e2e_team;"
    " sacctmgr -i remove qos e2e_long; true"
)
SHOW_ACCOUNTS = (
    "sacctmgr -n -P show assoc where account=e2e_team"
    " format=cluster,account,user,qos,defaultqos,maxjobs,fairshare"
    " && sacctmgr -n -P show qos where name=e2e_long format=name,priority,maxwall,flags,description"
)
