// A Curator InterProcessSemaphoreV2 contender for the interoperability test:
// takes one of LEASES leases ROUNDS times, appending "enter lease NAME" and
// "exit lease NAME" to LOG while holding it (one write each, O_APPEND).
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryNTimes;

public class CuratorSemaphoreContender {
  public static void main(String[] args) throws Exception {
    String hosts = args[0], path = args[1], name = args[2], log = args[5];
    int rounds = Integer.parseInt(args[3]), leases = Integer.parseInt(args[4]);
    try (CuratorFramework client =
             CuratorFrameworkFactory.newClient(hosts, 10000, 5000, new RetryNTimes(3, 100))) {
      client.start();
      InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, path, leases);
      for (int i = 0; i < rounds; ++i) {
        Lease lease = semaphore.acquire();
        try {
          append(log, "enter lease " + name + "\n");
          Thread.sleep(20);
          append(log, "exit lease " + name + "\n");
        } finally {
          semaphore.returnLease(lease);
        }
      }
    }
  }

  private static void append(String log, String line) throws Exception {
    Files.write(Paths.get(log), line.getBytes(StandardCharsets.UTF_8),
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
  }
}
