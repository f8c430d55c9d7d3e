stty -a > /tmp/pictures-try/before
/work/wt/pictures/build/pystack -p 20719 -F 499 --top 2>/tmp/pictures-try/e1
echo exit1=$?
/work/wt/pictures/build/pystack -p 20720 -F 499 --top 2>/tmp/pictures-try/e2
echo exit2=$?
sleep 3600
